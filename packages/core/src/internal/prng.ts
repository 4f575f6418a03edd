/**
 * Seeded normal samples: xoshiro128** (seeded through splitmix32) for uniforms and Box-Muller for
 * normals. Only integer ops and Math.log/sqrt/cos/sin, so a seed gives the same values on every V8.
 */
import { getRandomValues } from "node:crypto"

const splitmix32 = (seed: number): (() => number) => {
  let a = seed | 0
  return () => {
    a = (a + 0x9e3779b9) | 0
    let t = a ^ (a >>> 16)
    t = Math.imul(t, 0x21f0aaad)
    t ^= t >>> 15
    t = Math.imul(t, 0x735a2d97)
    return (t ^ (t >>> 15)) >>> 0
  }
}

const rotl = (x: number, k: number): number => (x << k) | (x >>> (32 - k))

/** Uniform doubles in [0, 1) with 53 random bits. */
const uniform = (seed: number): (() => number) => {
  // Every bit of the seed matters, fractional and beyond 2^32 included.
  const words = new Uint32Array(new Float64Array([seed]).buffer)
  const init = splitmix32(words[0] ^ Math.imul(words[1], 0x85ebca6b))
  let s0 = init()
  let s1 = init()
  let s2 = init()
  let s3 = init()
  // xoshiro's all-zero state is a fixed point.
  if ((s0 | s1 | s2 | s3) === 0) s0 = 1
  const next = (): number => {
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0
    const t = s1 << 9
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = rotl(s3, 11)
    return result
  }
  return () => ((next() >>> 5) * 2 ** 26 + (next() >>> 6)) / 2 ** 53
}

/** Standard normal samples from `seed` (a fresh random seed when undefined). */
export const normalSampler = (seed: number | undefined): (() => number) => {
  const u = uniform(seed ?? randomSeed())
  let spare: number | undefined
  return () => {
    if (spare !== undefined) {
      const z = spare
      spare = undefined
      return z
    }
    const r = Math.sqrt(-2 * Math.log(1 - u()))
    const theta = 2 * Math.PI * u()
    spare = r * Math.sin(theta)
    return r * Math.cos(theta)
  }
}

const randomSeed = (): number => {
  const [hi, lo] = getRandomValues(new Uint32Array(2))
  return (hi & 0x1fffff) * 2 ** 32 + lo
}
