// The check helpers of the SDK tiers' Node scripts (e2b/client/compat.mjs,
// interpreter/client/ci.mjs and cluster.mjs). check prints "ok <name> (<ms> ms)" or
// "FAIL <name>: <reason>" and carries on; failures() counts the checks that failed, for the
// script's exit code. No dependencies: each script imports it by its relative path.
let failed = 0

export async function check(name, fn) {
  const t0 = performance.now()
  try {
    await fn()
    console.log(`ok ${name} (${Math.round(performance.now() - t0)} ms)`)
  } catch (err) {
    failed++
    console.log(`FAIL ${name}: ${err?.stack ?? err}`)
  }
}

export function failures() {
  return failed
}

export function expect(cond, what) {
  if (!cond) throw new Error(what)
}

export const show = (v) => JSON.stringify(v)

// rejects awaits promise and returns its error, which must be a type; it throws otherwise.
export async function rejects(promise, type, what) {
  try {
    await promise
  } catch (err) {
    expect(err instanceof type, `${what}: got ${err?.name}: ${err?.message}, want ${type.name}`)
    return err
  }
  throw new Error(`${what}: succeeded, want ${type.name}`)
}

// pngSize reads the width and height from a base64 PNG's IHDR chunk.
export function pngSize(b64) {
  const b = Buffer.from(b64, 'base64')
  expect(b.subarray(1, 4).toString() === 'PNG', 'not a PNG')
  return [b.readUInt32BE(16), b.readUInt32BE(20)]
}
