// One line per check: "ok   name", or "FAIL name detail" and exit 1 at the first failure.
// passed() says how many checks ran, for the closing "all checks passed" line; throws(name, fn,
// want) checks that fn rejects with an error want accepts.
let n = 0

export function check(name, ok, detail = '') {
  n++
  if (!ok) {
    console.log(`FAIL ${name} ${detail}`)
    process.exit(1)
  }
  console.log(`ok   ${name}`)
}

export function passed() {
  return n
}

export async function throws(name, fn, want) {
  try {
    await fn()
    check(name, false, 'no error')
  } catch (e) {
    check(name, want(e), `${e?.constructor?.name}: ${e}`)
  }
}
