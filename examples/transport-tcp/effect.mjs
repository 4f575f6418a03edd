/**
 * The same transport as index.mjs, written in Effect: every hook an Effect that fails with the typed
 * errors it can raise. An object's registration is a scoped resource, served while its scope is
 * open (the runtime closes it when the last reference goes), and an aborted fetch is an interrupted
 * fiber, whose release closes the socket. The wire protocol is protocol.mjs.
 */
import * as net from "node:net"
import { TransferError } from "@tensorlane/core"
import { defineEffectTransport } from "@tensorlane/core/plugin"
import * as Effect from "effect/Effect"
import { listen, request } from "./protocol.mjs"

const NAME = "tcp-effect"

/** The tensors of the objects this process serves, by object id. */
const served = new Map()
/** The server once started, for close. */
let started

const failure = (what) => (cause) => new TransferError({ message: `${NAME} ${what}: ${cause instanceof Error ? cause.message : String(cause)}`, transport: NAME })

/** Started by the first object registered (most processes only consume), then shared. */
const listening = Effect.runSync(
  Effect.cached(
    Effect.tryPromise({ try: () => listen(served), catch: failure("cannot listen on 127.0.0.1") }).pipe(Effect.tap((server) => Effect.sync(() => (started = server)))),
  ),
)

export const tcpEffect = defineEffectTransport({
  name: NAME,
  capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true },
  register: ({ objectId, tensors }) =>
    Effect.gen(function* () {
      const server = yield* listening
      yield* Effect.acquireRelease(
        Effect.sync(() => served.set(objectId, tensors)),
        () => Effect.sync(() => served.delete(objectId)),
      )
      return { port: server.address().port, objectId }
    }),
  fetch: ({ metadata, into }) =>
    Effect.acquireUseRelease(
      Effect.sync(() => net.connect({ host: "127.0.0.1", port: metadata.port })),
      (socket) => Effect.tryPromise({ try: () => request(socket, metadata.objectId, into), catch: failure(`fetch of ${metadata.objectId}`) }),
      (socket) => Effect.sync(() => socket.destroy()),
    ),
  inspect: () => ({ registrations: [...served.keys()] }),
  close: Effect.sync(() => started?.close()),
})

export default tcpEffect
