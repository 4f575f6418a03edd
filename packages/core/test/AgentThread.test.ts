/**
 * The transfer agent's thread, started ahead of its options (an actor starts it before it has
 * loaded its modules): what happens to it before AgentClient listens is not lost, and AgentClient
 * fails its start with it; a thread that fails on its options fails the start the same way.
 */
import { expect, it } from "vitest"
import { AgentClient } from "../src/internal/agentClient.js"
import { AgentThread } from "../src/internal/agentThread.js"
import { TransferError } from "../src/Errors.js"
import { rejection } from "./helpers/errors.ts"

const options = { processId: "actor-1", address: "/nonexistent/actor-1.sock", transports: [], parentPid: process.pid }
const fixture = (name: string): URL => new URL(`./fixtures/${name}`, import.meta.url)
const ended = async (thread: AgentThread): Promise<void> => {
  while (thread.ended === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
}

it("a thread whose module failed before anyone listened: its error is kept, and the start fails with it", async () => {
  const thread = new AgentThread(fixture("agentThreadThrows.mjs"))
  await ended(thread)
  expect("error" in thread.ended! && thread.ended.error.message).toBe("the agent's module failed to load")
  const error = await rejection(AgentClient.start(options, () => undefined, thread))
  expect((error as Error).message).toBe("the agent's module failed to load")
})

it("a thread that exited before anyone listened: the start fails with TransferError naming the process and the code", async () => {
  const thread = new AgentThread(fixture("agentThreadExits.mjs"))
  await ended(thread)
  const error = await rejection(AgentClient.start(options, () => undefined, thread))
  expect(error).toBeInstanceOf(TransferError)
  expect((error as TransferError).message).toBe("the transfer agent of actor-1 exited (code 3)")
})

it("a thread that fails on its options: the start fails with its error", async () => {
  const error = await rejection(AgentClient.start(options, () => undefined, new AgentThread(fixture("agentThreadRefuses.mjs"))))
  expect((error as Error).message).toBe("no agent for actor-1")
})
