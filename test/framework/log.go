package framework

import (
	"io"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestLogEnv names the variable that, set to anything, shows the controllers' logs in a tier's
// output: PADDOCK_TEST_LOG=1 go test ./test/integration/sandbox/.
const TestLogEnv = "PADDOCK_TEST_LOG"

// SetTestLogger sets the process's loggers for a tier, from TestMain before RunMain. With
// PADDOCK_TEST_LOG set, controller-runtime logs to stderr in development format (V(1) included);
// otherwise its logs and klog's (sandboxd and client-go log through klog) are discarded, so a
// passing tier prints only what its tests say.
func SetTestLogger() {
	if os.Getenv(TestLogEnv) != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
		return
	}
	ctrl.SetLogger(logr.Discard())
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}
