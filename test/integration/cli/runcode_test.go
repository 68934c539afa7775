package cli

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// TestRunCode: run-code runs code in the claim's code interpreter (a real sandboxd requiring the
// sandbox token) straight at the pod and through a real router in its default mode, the port
// declared by the template: state kept between calls, code from stdin, a chart saved as a PNG,
// an exception's traceback on stderr with exit code 1.
func TestRunCode(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	var ls server.Listeners
	claim := claimOnLoopback(t, ns, kc, "analyst", loopbackPort{"interpreter", &ls.Interpreter})
	port := strconv.Itoa(portOf(ls.Interpreter))
	sandboxdtest.ServeInterpreter(t, ls, sandboxToken(t, ns, "analyst"))

	mustPaddock(t, kc, "run-code", "analyst", "--interpreter-port", port, "total = 40")
	stdout, stderr := mustPaddockIn(t, kc, strings.NewReader("print('adding')\ntotal + 2\n"), "run-code", "analyst", "--interpreter-port", port)
	if stdout != "adding\n42\n" || stderr != "" {
		t.Errorf("run-code from stdin: stdout %q, stderr %q; want what it printed, then its value 42", stdout, stderr)
	}
	stdout, _ = mustPaddock(t, kc, "run-code", "analyst", "--interpreter-port", port, "--language", "bash", "echo $((6 * 7))")
	if stdout != "42\n" {
		t.Errorf("run-code --language bash: stdout %q, want 42", stdout)
	}
	images := filepath.Join(t.TempDir(), "charts")
	_, stderr = mustPaddock(t, kc, "run-code", "analyst", "--interpreter-port", port, "--images", images,
		"import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2), dpi=100)\nplt.plot([1, 2])\nplt.show()")
	data, err := os.ReadFile(filepath.Join(images, "result-1.png"))
	if err != nil || !strings.Contains(stderr, "result-1.png") {
		t.Fatalf("run-code --images: %v, stderr %q; want charts/result-1.png saved and named", err, stderr)
	}
	if img, err := png.Decode(bytes.NewReader(data)); err != nil || img.Bounds().Dx() < 150 || img.Bounds().Dx() > 220 {
		t.Errorf("the saved chart: %v; want a PNG of about 200x200", err)
	}
	stdout, stderr, err = paddock(t, kc, "run-code", "analyst", "--interpreter-port", port, "1/0")
	if cli.ExitCode(err) != 1 || stdout != "" || !strings.Contains(stderr, "ZeroDivisionError") {
		t.Errorf("run-code raising: err %v, stdout %q, stderr %q; want exit code 1 and the traceback on stderr", err, stdout, stderr)
	}
	if _, _, err := paddock(t, kc, "run-code", "analyst", "--interpreter-port", port, " "); err == nil || !strings.Contains(err.Error(), "no code") {
		t.Errorf("run-code with blank code: %v; want an error saying there is no code", err)
	}

	// Through the router as installed.
	url, granted := routerAsInstalled(t, ns, claim)
	t.Setenv(cli.RouterTokenEnv, granted)
	routed := []string{"run-code", "analyst", "--interpreter-port", port, "--router-url", url, "total"}
	framework.Eventually(t, func(context.Context) error { // the router's cache sees the claimed Sandbox
		_, _, err := paddock(t, kc, routed...)
		return err
	})
	if stdout, _ := mustPaddock(t, kc, routed...); stdout != "40\n" {
		t.Errorf("run-code through the router: stdout %q, want the context's state 40", stdout)
	}
}
