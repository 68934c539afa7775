package cli

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/paddock-dev/paddock/sdk"
)

// terminal is the local side of `exec -t`: the size to start with and later sizes.
type terminal struct {
	size   *sdk.TerminalSize
	resize <-chan sdk.TerminalSize
}

// localTerminal puts stdin in raw mode when it is a terminal, so keys such as Ctrl-C reach the
// remote program instead of stopping paddock, and follows the window size of stdout (or stdin)
// through SIGWINCH. restore undoes both. When neither is a terminal the remote terminal gets the
// daemon's default size and nothing changes locally.
func localTerminal(stdin io.Reader, stdout io.Writer) (*terminal, func(), error) {
	t := &terminal{size: &sdk.TerminalSize{}}
	sizeFD := -1
	for _, s := range []any{stdout, stdin} {
		if f, ok := s.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			sizeFD = int(f.Fd())
			break
		}
	}
	var restores []func()
	restore := func() {
		for i := len(restores) - 1; i >= 0; i-- {
			restores[i]()
		}
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		state, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return nil, nil, err
		}
		restores = append(restores, func() { _ = term.Restore(int(f.Fd()), state) })
	}
	if sizeFD < 0 {
		return t, restore, nil
	}
	if cols, rows, err := term.GetSize(sizeFD); err == nil {
		t.size = &sdk.TerminalSize{Cols: uint16(cols), Rows: uint16(rows)}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	sizes := make(chan sdk.TerminalSize, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-winch:
				if cols, rows, err := term.GetSize(sizeFD); err == nil {
					select {
					case sizes <- sdk.TerminalSize{Cols: uint16(cols), Rows: uint16(rows)}:
					case <-stop:
						return
					}
				}
			}
		}
	}()
	restores = append(restores, func() { signal.Stop(winch); close(stop) })
	t.resize = sizes
	return t, restore, nil
}
