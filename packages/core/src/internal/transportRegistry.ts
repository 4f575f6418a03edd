/**
 * Loads transports by module specifier. Every process (driver main thread, actor main threads and
 * every transfer agent) imports the same modules, so no code is shipped by value.
 */
import { isAbsolute, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { TransportLoadError, UnknownTransportError } from "../Errors.js"
import { type FetchRequest, type TensorTransport, defineTransport, isTensorTransport } from "../Transport.js"

export const objectStoreName = "object-store"

/**
 * The built-in default: bytes travel through the control plane, read by the consumer's agent from the
 * producer's agent (which serves them even while the producer's main thread is busy).
 */
export const objectStoreTransport = (fetch: (request: FetchRequest) => Promise<void>): TensorTransport =>
  defineTransport({
    name: objectStoreName,
    // A reply's body may be read into the receive buffers after its fetch was given up on.
    capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true, tracksBuffers: true },
    fetch,
  })

/** Relative paths are taken from the driver's working directory, so that every process finds the same file. */
export const normalizeSpecifier = (specifier: string): string =>
  specifier.startsWith(".") || isAbsolute(specifier) ? pathToFileURL(resolve(specifier)).href : specifier

const importTransports = async (specifier: string): Promise<Array<TensorTransport>> => {
  let module: Record<string, unknown>
  try {
    module = await import(specifier)
  } catch (cause) {
    throw new TransportLoadError({
      message: `cannot import transport module "${specifier}": ${cause instanceof Error ? cause.message : String(cause)}. Is the package installed next to @tensorlane/core?`,
      specifier,
    })
  }
  const found = [...new Set(Object.values(module).filter(isTensorTransport))]
  if (found.length === 0) {
    throw new TransportLoadError({
      message: `module "${specifier}" exports no TensorTransport (an object with a lowercase name and capabilities)`,
      specifier,
    })
  }
  return found.map((t) => defineTransport(t))
}

export interface TransportDeps {
  readonly fetchFrom: (request: FetchRequest) => Promise<void>
}

export const loadTransports = async (
  specifiers: ReadonlyArray<string>,
  deps: TransportDeps,
): Promise<Map<string, TensorTransport>> => {
  const registry = new Map<string, TensorTransport>([[objectStoreName, objectStoreTransport(deps.fetchFrom)]])
  for (const specifier of specifiers) {
    for (const transport of await importTransports(specifier)) {
      const existing = registry.get(transport.name)
      if (existing !== undefined && existing !== transport) {
        throw new TransportLoadError({ message: `two transports are named "${transport.name}" (the second from "${specifier}")`, specifier })
      }
      registry.set(transport.name, transport)
    }
  }
  return registry
}

export const unknownTransport = (name: string, registered: Iterable<string>): UnknownTransportError => {
  const names = [...registered]
  return new UnknownTransportError({
    message: `unknown tensor transport "${name}"; registered transports: ${names.join(", ")}. Name its module in start({ transports }).`,
    transport: name,
    registered: names,
  })
}
