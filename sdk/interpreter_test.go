package sdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/sandboxd/interpreter"
)

// debianPython has numpy, pandas and matplotlib (hack/install-deps.sh installs them).
const debianPython = "/usr/bin/python3"

// interpreterUnderTest is the real code interpreter service on loopback, behind a check of the
// bearer token the SDK sends.
func interpreterUnderTest(t *testing.T) *Interpreter {
	t.Helper()
	if _, err := os.Stat(debianPython); err != nil {
		t.Fatalf("%s is missing: run hack/install-deps.sh", debianPython)
	}
	srv := interpreter.New(interpreter.Config{Python: debianPython, Dir: t.TempDir(), Environ: os.Environ,
		KeepaliveInterval: time.Second, InterruptGrace: time.Second})
	t.Cleanup(srv.Close)
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	in, err := NewInterpreter(Endpoint{URL: ts.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestRunCode(t *testing.T) {
	in := interpreterUnderTest(t)
	ctx := context.Background()

	t.Run("value, output and state", func(t *testing.T) {
		if _, err := in.RunCode(ctx, "x = 20\nprint('hello')", RunCodeOptions{}); err != nil {
			t.Fatal(err)
		}
		ex, err := in.RunCode(ctx, "import sys\nprint('out')\nprint('err', file=sys.stderr)\nx + 1", RunCodeOptions{})
		if err != nil || ex.Text() != "21" || ex.Stdout != "out\n" || ex.Stderr != "err\n" || ex.Error != nil || ex.ExecutionCount < 2 {
			t.Fatalf("RunCode = %+v, %v; want text 21, stdout out, stderr err and a count of 2 or more", ex, err)
		}
	})
	t.Run("an exception is the execution's error", func(t *testing.T) {
		ex, err := in.RunCode(ctx, "1/0", RunCodeOptions{})
		if err != nil || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || !strings.Contains(ex.Error.Traceback, "ZeroDivisionError") {
			t.Fatalf("RunCode(1/0) = %+v, %v; want a ZeroDivisionError with its traceback", ex, err)
		}
	})
	t.Run("a chart as a PNG of the figure's size", func(t *testing.T) {
		ex, err := in.RunCode(ctx, "import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=100)\nplt.bar(['a', 'b'], [1, 2])\nplt.show()", RunCodeOptions{})
		if err != nil || len(ex.Results) != 1 {
			t.Fatalf("RunCode = %+v, %v; want one result", ex, err)
		}
		r := ex.Results[0]
		data, err := base64.StdEncoding.DecodeString(r.PNG)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("the PNG does not decode: %v", err)
		}
		// As IPython's inline backend, the interpreter saves with bbox_inches='tight': the 300x200
		// canvas cut to what is drawn, plus 0.1 in of padding on each side.
		if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w < 240 || w > 320 || h < 160 || h > 220 {
			t.Errorf("the PNG is %dx%d; want about 300x200", w, h)
		}
		if r.Text != "<Figure size 300x200 with 1 Axes>" || !strings.Contains(string(r.Chart), `"type":"bar"`) || !strings.Contains(strings.Join(r.Formats(), ","), "png") {
			t.Errorf("text %q, chart %s, formats %v; want the 300x200 figure as a bar chart and png", r.Text, r.Chart, r.Formats())
		}
	})
	t.Run("language, env and an unknown context", func(t *testing.T) {
		ex, err := in.RunCode(ctx, `echo "$GREETING"`, RunCodeOptions{Language: "bash", Env: map[string]string{"GREETING": "hi"}})
		if err != nil || ex.Stdout != "hi\n" {
			t.Fatalf("bash = %+v, %v; want hi", ex, err)
		}
		_, err = in.RunCode(ctx, "1", RunCodeOptions{Context: "no-such-context"})
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
			t.Fatalf("an unknown context = %v; want a 404 HTTPError", err)
		}
	})
	t.Run("a timeout interrupts the cell and keeps the state", func(t *testing.T) {
		ex, err := in.RunCode(ctx, "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)", RunCodeOptions{Timeout: 2 * time.Second})
		if !errors.Is(err, ErrCodeTimeout) || ex.Stdout != "started\n" {
			t.Fatalf("a cell that never ends = %+v, %v; want ErrCodeTimeout with what it printed", ex, err)
		}
		ex, err = in.RunCode(ctx, "x", RunCodeOptions{})
		if err != nil || ex.Text() != "20" {
			t.Fatalf("x after the interrupt = %+v, %v; want 20", ex, err)
		}
	})
}

func TestRunCodeNeedsTheToken(t *testing.T) {
	in := interpreterUnderTest(t)
	in.rt.headers.Del("Authorization")
	_, err := in.RunCode(context.Background(), "1", RunCodeOptions{})
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
		t.Fatalf("RunCode without the token = %v; want 401", err)
	}
}

func TestReadExecutionFailsOnAStreamCutShort(t *testing.T) {
	var ex Execution
	err := readExecution(strings.NewReader(`{"type":"stdout","text":"a","timestamp":"t"}`+"\n"), &ex)
	if err == nil || !strings.Contains(err.Error(), "end_of_execution") || ex.Stdout != "a" {
		t.Fatalf("readExecution of a cut stream = %+v, %v; want an error naming end_of_execution and the output so far", ex, err)
	}
}
