// Loads the worked example transport by package name and moves a tensor with it.
import { start } from "@tensorlane/core"
import { Worker } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane-examples/transport-tcp"] })
const [producer, consumer] = await cluster.spawn(Worker, { count: 2 })
using ref = producer.make.options({ tensorTransport: "tcp" })(1 << 20)
console.log(`sum over tcp: ${await cluster.get(consumer.sum(ref))}`)
// One-sided: the driver reads it too, straight into a tensor of its own.
console.log(`driver copy: ${await cluster.get(ref)}`)
