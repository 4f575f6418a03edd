/**
 * Environment settings, read one way by every package: unset and empty both mean "not set" (the
 * setting's fallback), and a value the variable does not accept is an InvalidSettingError naming
 * the variable, the value and what it accepts. Native code reads its few settings the same way
 * (native-kit/tensorlane/Settings.h); docs/configuration.md lists every variable.
 */
import { InvalidSettingError } from "./Errors.js"

export interface Setting<A> {
  readonly variable: string
  /** What the variable accepts, completing "<variable> must be ...". */
  readonly accepts: string
  /** The value when the variable is unset or empty. */
  readonly fallback: A
  /** A set variable's value; undefined when the variable does not accept it. */
  readonly parse: (raw: string) => A | undefined
}

/** The error for a value that `variable` does not accept (the message native code gives as well). */
export const invalidSetting = (variable: string, value: string, accepts: string): InvalidSettingError =>
  new InvalidSettingError({ message: `${variable} must be ${accepts}, got "${value}"`, variable, value, accepts })

/** The setting's value now; InvalidSettingError for a value it does not accept. */
export const readSetting = <A>(setting: Setting<A>): A => {
  const raw = process.env[setting.variable]
  if (raw === undefined || raw === "") return setting.fallback
  const value = setting.parse(raw)
  if (value === undefined) throw invalidSetting(setting.variable, raw, setting.accepts)
  return value
}

/** A whole number from `min` to `max` (decimal digits only), of `unit` when given. */
export const integerSetting = (
  variable: string,
  options: { readonly min: number; readonly max: number; readonly fallback: number; readonly unit?: string },
): Setting<number> => ({
  variable,
  accepts: `a whole number${options.unit !== undefined ? ` of ${options.unit}` : ""} from ${options.min} to ${options.max}`,
  fallback: options.fallback,
  parse: (raw) => {
    const value = /^\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN
    return value >= options.min && value <= options.max ? value : undefined
  },
})

/** The longest wait a native operation takes (timeoutArg in native-kit/tensorlane/Arguments.h): 100 hours. */
const LONGEST_WAIT_MS = 100 * 3600 * 1000

/** A wait in milliseconds, from 1 to the longest a native operation takes. */
export const timeoutSetting = (variable: string, fallback: number): Setting<number> =>
  integerSetting(variable, { min: 1, max: LONGEST_WAIT_MS, fallback, unit: "milliseconds" })

/** One of `choices`, as written. */
export const choiceSetting = <C extends string>(variable: string, choices: ReadonlyArray<C>, fallback: C): Setting<C> => ({
  variable,
  accepts: `one of ${choices.join(", ")}`,
  fallback,
  parse: (raw) => choices.find((choice) => choice === raw),
})

/** Any value (a path, a host name), which the code that uses it checks; `accepts` says what it should be. */
export const textSetting = (variable: string, accepts: string): Setting<string | undefined> => ({
  variable,
  accepts,
  fallback: undefined,
  parse: (raw) => raw,
})
