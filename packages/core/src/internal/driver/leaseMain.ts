/** Entry point of a driver's lease worker thread (Leases.ts), in a cluster across hosts. */
import { parentPort, workerData } from "node:worker_threads"
import { loadClusterConfig, tlsOptionsFor } from "../../ClusterConfig.js"
import { type LeaseCommand, type LeaseEvent, type LeaseWorkerData, Leases, nodeAddress } from "./Leases.js"

const port = parentPort!
const { config: file, driver, clusterId } = workerData as LeaseWorkerData
const config = loadClusterConfig(file)
const hosts = new Map(config.hosts.map((h) => [h.name, nodeAddress(h)]))
const leases = new Leases(tlsOptionsFor(config, driver), clusterId, (name) => hosts.get(name)!, (event: LeaseEvent) => port.postMessage(event))

port.on("message", (command: LeaseCommand) => leases.hold(command))
