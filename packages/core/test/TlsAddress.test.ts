/** The addresses of cluster members' TLS endpoints, as processes pass them around (`tls://member@host:port`). */
import { describe, expect, it } from "vitest"
import { TransferError } from "../src/Errors.js"
import { openSocket, tlsAddress, tlsEndpoint } from "../src/internal/connection.js"

describe("tls addresses", () => {
  it("round-trip IPv4 and IPv6 endpoints", () => {
    for (const endpoint of [
      { member: "h2", host: "10.99.0.12", port: 41234 },
      { member: "driver", host: "fd00::12", port: 7400 },
    ]) {
      expect(tlsEndpoint(tlsAddress(endpoint))).toEqual(endpoint)
    }
    expect(tlsAddress({ member: "h1", host: "fd00::1", port: 1 })).toBe("tls://h1@[fd00::1]:1")
  })

  it("take a Unix socket path, or anything else, for no TLS endpoint", () => {
    for (const address of ["/tmp/tensorlane-x/driver.sock", "tls://h1@10.0.0.1", "tls://H1@10.0.0.1:7400", "tcp://h1@10.0.0.1:7400", "tls://h1@host.example:7400"]) {
      expect(tlsEndpoint(address)).toBeUndefined()
    }
  })

  it("refuse a TLS address in a process without a cluster's credentials, before connecting", () => {
    expect(() => openSocket("tls://h1@127.0.0.1:9", undefined)).toThrow(TransferError)
  })
})
