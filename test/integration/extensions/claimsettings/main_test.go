// Package claimsettings proves, against a real kube-apiserver, how a claim binds a warm Sandbox
// whose runtime is sandboxd: pool members start locked, the claim controller sends the claim (and
// its env) to a real sandboxd (run in this process on 127.0.0.1) with the member's control token
// and only then lets the claim turn Ready, and it falls back to a cold Sandbox when sandboxd
// refuses, calling a member that somebody else bound first WarmMemberTampered.
//
// The pool members' Pod IPs come from a readiness stand-in and reach nothing, so the claim
// controller's address resolution is injected: each test registers the loopback address of the
// sandboxd it started under the member's Pod IP.
package claimsettings

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/test/framework"
)

var (
	env *framework.Env
	// daemons maps the Pod IPs of pool members to the sandboxd serving them.
	daemons = &registry{byIP: map[string]*daemon{}}
	// claimWrites records every write of the claim controller.
	claimWrites = &writeLog{}
	// testKey is the installation's credentials key the claim controller derives tokens from.
	testKey = bytes.Repeat([]byte{42}, credentials.KeySize)
)

// giveUpAfter is the claim controller's ClaimSettingsOptions.GiveUpAfter: far longer than any
// test runs, so only a test that moves the clock past it sees a claim give up.
const giveUpAfter = time.Hour

// clockOffset moves the claim controller's clock ahead of the real one.
var clockOffset atomic.Int64

// offsetClock is the real clock moved ahead by clockOffset.
type offsetClock struct{ clock.RealClock }

func (offsetClock) Now() time.Time { return time.Now().Add(time.Duration(clockOffset.Load())) }

func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func TestMain(m *testing.M) {
	framework.SetTestLogger()
	framework.RunMain(m, &env, startControllers)
}

// startControllers runs the readiness stand-in (Sandbox controller and kubelet) and the
// template, pool and claim controllers.
func startControllers(e *framework.Env) (func(), error) {
	readiness, err := framework.StartSandboxReadiness(e)
	if err != nil {
		return nil, fmt.Errorf("starting the Sandbox readiness stand-in: %w", err)
	}
	stop, err := e.StartManager(func(mgr ctrl.Manager) error {
		claims, errClaims := sandboxclaim.New(&recordingClient{Client: mgr.GetClient(), log: claimWrites},
			mgr.GetEventRecorder(sandboxclaim.ControllerName), sandboxclaim.Options{
				APIReader:      mgr.GetAPIReader(),
				Clock:          offsetClock{},
				ClaimSettings:  sandboxclaim.ClaimSettingsOptions{Address: daemons.address, GiveUpAfter: giveUpAfter},
				CredentialsKey: testKey,
			})
		pools, errPools := sandboxwarmpool.New(mgr.GetClient(), mgr.GetEventRecorder(sandboxwarmpool.ControllerName), sandboxwarmpool.DefaultOptions())
		templates, errTemplates := sandboxtemplate.New(mgr.GetClient(), mgr.GetEventRecorder(sandboxtemplate.ControllerName), sandboxtemplate.Options{})
		if err := errors.Join(errClaims, errPools, errTemplates); err != nil {
			return err
		}
		return errors.Join(claims.SetupWithManager(mgr), pools.SetupWithManager(mgr), templates.SetupWithManager(mgr))
	}, func(o *manager.Options) { o.Controller = config.Controller{SkipNameValidation: ptr.To(true)} })
	if err != nil {
		readiness.Stop()
		return nil, err
	}
	return func() { stop(); readiness.Stop() }, nil
}

// registry resolves a Sandbox to the loopback address of its sandboxd, by Pod IP.
type registry struct {
	mu   sync.Mutex
	byIP map[string]*daemon
}

func (r *registry) add(ip string, d *daemon) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byIP[ip] = d
}

// address is the claim controller's ClaimSettingsOptions.Address. A daemon may be told to fail a
// number of resolutions first, as an unreachable Pod would.
func (r *registry) address(sb *agentsv1beta1.Sandbox) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(sb.Status.PodIPs) == 0 {
		return "", fmt.Errorf("sandbox %q has no pod IP", sb.Name)
	}
	d, ok := r.byIP[sb.Status.PodIPs[0]]
	if !ok {
		return "", fmt.Errorf("no sandboxd runs at pod IP %s of sandbox %q", sb.Status.PodIPs[0], sb.Name)
	}
	d.resolutions++
	if d.failResolutions > 0 {
		d.failResolutions--
		return "", fmt.Errorf("sandboxd at %s is not reachable yet", sb.Status.PodIPs[0])
	}
	return d.rest, nil
}

// writeLog records the writes of the claim controller, as "verb Kind namespace/name[/status]".
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) add(verb string, obj client.Object, sub string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kind := reflect.TypeOf(obj).Elem().Name()
	l.writes = append(l.writes, fmt.Sprintf("%s %s %s/%s%s", verb, kind, obj.GetNamespace(), obj.GetName(), sub))
}

// inNamespace returns the writes to objects of ns.
func (l *writeLog) inNamespace(ns string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.writes {
		if containsNamespace(w, ns) {
			out = append(out, w)
		}
	}
	return out
}
