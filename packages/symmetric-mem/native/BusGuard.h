// A copy out of memory that another process may cut short. A consumer copies out of a producer's
// shared-memory segment, which that producer (or any process of its user) can shrink with
// ftruncate; pages past the new end then raise SIGBUS when read, which would kill the consumer.
// The copy runs under a SIGBUS handler that, for a fault inside its source, jumps back out of it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorlane::symmetric {

/** Copies `length` bytes; false where reading `source` raised SIGBUS (the rest of `target` is undefined). */
bool copyGuarded(uint8_t* target, const uint8_t* source, size_t length);

}  // namespace tensorlane::symmetric
