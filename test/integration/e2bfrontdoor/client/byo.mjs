// Bring your own image: drives a sandbox of E2B_TEMPLATE, an image without sandboxd that
// Paddock injected it into, with the unmodified SDK named by E2B_PKG. Commands and files work
// as in any sandbox, and the image's own service (a web server on SERVICE_PORT serving
// SERVICE_BODY) answers from inside. Prints one line per check, then the sandbox id as JSON
// ({"id": ...}) as the last line; exits 1 on the first failure.
const { Sandbox } = await import(process.env.E2B_PKG)
const { check, passed } = await import('./check.mjs')

const sbx = await Sandbox.create(process.env.E2B_TEMPLATE, { timeoutMs: 600_000, requestTimeoutMs: 240_000 })
check('create returns an id', /^[a-z0-9]+$/.test(sbx.sandboxId), sbx.sandboxId)
const r = await sbx.commands.run('echo hi; id -u; echo err 1>&2')
check('commands.run as the template user', r.exitCode === 0 && r.stdout === 'hi\n1000\n' && r.stderr === 'err\n', JSON.stringify(r))
const env = await sbx.commands.run('env')
check('no sandboxd variable in a command', !/^SANDBOXD_/m.test(env.stdout), env.stdout)
await sbx.files.write('notes/byo.txt', 'written by the SDK')
check('files.read', (await sbx.files.read('notes/byo.txt')) === 'written by the SDK')
const cat = await sbx.commands.run('cat notes/byo.txt')
check('a command sees the file', cat.stdout === 'written by the SDK', JSON.stringify(cat))
const failed = await sbx.commands.run('exit 3').then(() => 'no error', (e) => e.exitCode)
check('a failing command reports its exit code', failed === 3, String(failed))
// The image's service, from inside the sandbox: bash's /dev/tcp, no HTTP client needed.
const get = `exec 3<>/dev/tcp/127.0.0.1/${process.env.SERVICE_PORT}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3`
const served = await sbx.commands.run(get)
check('the image\'s service answers inside the sandbox', served.stdout.includes(process.env.SERVICE_BODY), JSON.stringify(served))
console.log(`all checks passed (${passed()})`)
console.log(JSON.stringify({ id: sbx.sandboxId }))
