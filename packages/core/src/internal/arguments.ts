/** Checks of the options users pass: a bad one is an InvalidArgumentError naming it and what it accepts. */
import { InvalidArgumentError } from "../Errors.js"

/** A time limit in ms: undefined (the caller's default), or a number >= 0 (Infinity: no limit). */
export const checkTimeout = (value: unknown, argument: string): number | undefined => {
  if (value === undefined) return undefined
  if (typeof value !== "number" || Number.isNaN(value) || value < 0) {
    throw new InvalidArgumentError({ message: `${argument} must be a number of milliseconds >= 0 (Infinity for no limit), not ${describe(value)}`, argument })
  }
  return value
}

/** An options argument: undefined (no options) or an object. */
export const checkOptions = <O extends object>(value: O | undefined, argument: string): O | Record<string, never> => {
  if (value === undefined) return {}
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError({ message: `${argument} must be an object of options, not ${describe(value)}`, argument })
  }
  return value
}

/** A short description of a value for error messages. */
export const describe = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint" || value == null) return String(value)
  if (typeof value === "function") return "a function"
  if (typeof value === "symbol") return "a symbol"
  if (Array.isArray(value)) return value.length === 0 ? "an empty array" : "an array"
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === "string" && name !== "" && name !== "Object" ? `a ${name}` : "an object"
}

/** Node fires a timer at once when asked for more than this (about 24.8 days): longer limits wait this long. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** A timer for a time limit: none for an infinite one, and never one that Node would fire at once for being too long. */
export const limitTimer = (timeoutMs: number, onTimeout: () => void): NodeJS.Timeout | undefined =>
  Number.isFinite(timeoutMs) ? setTimeout(onTimeout, Math.min(Math.max(0, timeoutMs), MAX_TIMER_MS)) : undefined
