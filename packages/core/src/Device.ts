/**
 * Where a tensor's storage lives: host memory or one CUDA device. Device strings are canonical
 * (`cuda:0`, never `cuda` or `cuda:00`) so that two equal devices always compare equal as strings.
 */
import { DeviceError } from "./Errors.js"

export type Device = "cpu" | `cuda:${number}`

const CUDA_PATTERN = /^cuda:(0|[1-9][0-9]*)$/

/** Validates a device string (typically from user options or a peer); DeviceError on anything else. */
export const parseDevice = (s: unknown): Device => {
  if (s === "cpu") return s
  if (typeof s === "string") {
    const m = CUDA_PATTERN.exec(s)
    if (m !== null && Number.isSafeInteger(Number(m[1]))) return s as Device
  }
  const shown = typeof s === "string" ? JSON.stringify(s) : String(s)
  throw new DeviceError({
    message: `unknown device ${shown}: expected "cpu" or "cuda:<index>" (for example "cuda:0")`,
    device: shown,
  })
}

export const isCuda = (d: Device): d is `cuda:${number}` => d.startsWith("cuda:")

/** The CUDA ordinal of a device; -1 for the host, the convention of CUDA APIs (cudaCpuDeviceId). */
export const deviceIndex = (d: Device): number => (isCuda(d) ? Number(d.slice(5)) : -1)
