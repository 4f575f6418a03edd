/**
 * PROTOCOL_VERSION (messages.ts) is raised with any change to a message's form, or a node and a
 * driver of two releases read each other's messages wrongly instead of refusing each other. This test
 * holds the fingerprint of every message schema that crosses a process boundary (messages.ts, and
 * the node engine's requests in engine.ts) with the version it belongs to: a schema changed without a
 * new version fails here. Byte layouts outside those schemas (frame.ts, wireMetas.ts, valueCodec.ts)
 * are not covered: a change to them raises the version by hand.
 */
import { createHash } from "node:crypto"
import { Schema } from "effect"
import { expect, it } from "vitest"
import { NodeEntity } from "../src/internal/engine.js"
import {
  AgentReply,
  AgentRequest,
  FromActor,
  HostInfo,
  LeaseRenewal,
  ObjectInfo,
  PROTOCOL_VERSION,
  ToActor,
  ToNode,
} from "../src/internal/messages.js"

/** The version and the fingerprint of its schemas, recorded together. */
const RECORDED = { version: 2, fingerprint: "bb1b76458d7658b478e3593ad88428f938550044db4b3224d3582353c62a0d37" }

const fingerprint = (): string => {
  const engine = [...NodeEntity.protocol.requests.values()].flatMap((rpc) => [rpc._tag, rpc.payloadSchema, rpc.successSchema, rpc.errorSchema])
  const forms = [ToActor, FromActor, AgentRequest, AgentReply, ObjectInfo, ToNode, LeaseRenewal, HostInfo, ...engine].map((form) =>
    typeof form === "string" ? form : Schema.toJsonSchemaDocument(form),
  )
  return createHash("sha256").update(JSON.stringify(forms)).digest("hex")
}

it("the messages' schemas are those of the recorded PROTOCOL_VERSION", () => {
  const now = fingerprint()
  if (PROTOCOL_VERSION === RECORDED.version) {
    expect(now, "a message's form changed: raise PROTOCOL_VERSION in messages.ts, then record its fingerprint here").toBe(RECORDED.fingerprint)
  } else {
    expect.fail(`PROTOCOL_VERSION is ${PROTOCOL_VERSION}: record { version: ${PROTOCOL_VERSION}, fingerprint: "${now}" } here`)
  }
})
