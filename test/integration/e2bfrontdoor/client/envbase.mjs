// Does the first lines of real work in an E2B_TEMPLATE sandbox with the unmodified SDK named by
// E2B_PKG, offline: Python, Node.js, git, curl and wget against SERVER_URL (a server of the test,
// by IP address), pip install of the wheel it serves and of a C extension from a local directory,
// npm install of a local tarball, locally and globally. PROBE is the value the server's /hello,
// the wheel and the npm package hold. Prints one line per check and "all checks passed" at the
// end; exits 1 on the first failure.
const { Sandbox } = await import(process.env.E2B_PKG)

const server = process.env.SERVER_URL
const probe = process.env.PROBE
const sbx = await Sandbox.create(process.env.E2B_TEMPLATE, { metadata: { run: 'env-base' }, timeoutMs: 900_000, requestTimeoutMs: 240_000 })

// run runs cmd with bash -l, as the SDK does, and checks its stdout; a build under gVisor on a
// loaded node takes minutes, so the command may too.
async function run(name, cmd, want) {
  let r
  try {
    r = await sbx.commands.run(cmd, { timeoutMs: 600_000 })
  } catch (e) {
    r = e // CommandExitError carries exitCode, stdout and stderr
  }
  const ok = r.exitCode === 0 && (want instanceof RegExp ? want.test(r.stdout) : r.stdout === want)
  if (!ok) {
    console.log(`FAIL ${name}: exit ${r.exitCode}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- want\n${want}`)
    await sbx.kill()
    process.exit(1)
  }
  console.log(`ok   ${name}`)
}

await run('the user is uid 1000 at home', 'id -u; id -un; echo "$HOME"; pwd', '1000\nuser\n/home/user\n/home/user\n')
await run('the package list is in the image', 'cut -f1 /etc/paddock/packages.txt | grep -cxE "python3|nodejs|git|curl|gcc"', '5\n')
await run('python3 -c', 'python3 -c "import sys; print(sys.version_info[0], 6 * 7)"', '3 42\n')
// The user's environment comes first and still sees Debian's Python packages.
await run('python3 is the user environment, which sees Debian packages',
  'python3 -c "import sys, wheel; print(sys.prefix); print(wheel.__file__)"', /^\/opt\/venv\n\/usr\/lib\/python3\/dist-packages\/wheel\//)
// The README's Python quick start, but for its pip install from PyPI.
await sbx.files.write('/home/user/stats.py', 'import statistics, sys\nprint(statistics.mean(map(float, sys.argv[1:])))\n')
await run("the README's stats.py", 'python3 stats.py 1 2 3 4', '2.5\n')
await run('node -e', 'node -e "console.log(6 * 7, typeof require(\'fs\').readFileSync)"', '42 function\n')
await run('git init and commit',
  'rm -rf repo && git init -q repo && cd repo && echo hello > f && git add f && ' +
  'git -c user.name=e2e -c user.email=e2e@paddock.invalid commit -qm first && git log --format=%s', 'first\n')
await run('curl to the test server', `curl -sS --max-time 30 ${server}/hello`, `${probe}\n`)
await run('wget to the test server', `wget -q -T 30 -O - ${server}/hello`, `${probe}\n`)
// pip ignores a plain-HTTP link page unless its host is named trusted.
await run('pip install of the served wheel, no index',
  `pip install -q --no-index --trusted-host ${new URL(server).hostname} --find-links ${server}/wheels/ paddock-probe && ` +
  'python3 -c "import paddock_probe; print(paddock_probe.VALUE)"', `${probe}\n`)

// A C extension from a local directory: gcc and Python's headers build it on install.
await sbx.commands.run('mkdir -p cext lib app')
await sbx.files.write('/home/user/cext/setup.py',
  'from setuptools import Extension, setup\n' +
  'setup(name="paddock-cext", version="1.0", ext_modules=[Extension("paddock_cext", ["paddock_cext.c"])])\n')
await sbx.files.write('/home/user/cext/paddock_cext.c', `#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *add(PyObject *self, PyObject *args) {
  long a, b;
  if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
  return PyLong_FromLong(a + b);
}

static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "paddock_cext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_paddock_cext(void) { return PyModule_Create(&module); }
`)
await run('pip install of a C extension from a local directory',
  'pip install -q --no-index --no-build-isolation ./cext && python3 -c "import paddock_cext; print(paddock_cext.add(40, 2))"', '42\n')

// An npm package packed in the sandbox, installed from its tarball with no registry.
await sbx.files.write('/home/user/lib/package.json', JSON.stringify({
  name: 'paddock-probe', version: '1.0.0', main: 'index.js', bin: { 'paddock-probe': 'cli.js' },
}))
await sbx.files.write('/home/user/lib/index.js', `module.exports = { value: ${JSON.stringify(probe)} }\n`)
await sbx.files.write('/home/user/lib/cli.js', '#!/usr/bin/env node\nconsole.log(require("./index.js").value)\n')
await run('npm pack', 'cd lib && npm pack --silent', 'paddock-probe-1.0.0.tgz\n')
await run('npm install of the tarball, offline',
  'cd app && npm install --offline --no-audit --silent ../lib/paddock-probe-1.0.0.tgz && node -e "console.log(require(\'paddock-probe\').value)"', `${probe}\n`)
await run('npm install -g of the tarball, offline, puts its command on PATH',
  'npm install -g --offline --no-audit --silent ./lib/paddock-probe-1.0.0.tgz && paddock-probe', `${probe}\n`)

await sbx.kill()
console.log('all checks passed')
