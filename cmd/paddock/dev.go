package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/standin"
)

// defaultStateDir is where `paddock dev` keeps its cluster unless told otherwise.
const defaultStateDir = "/var/lib/paddock-dev"

// devOptions are the flags of `paddock dev up`.
type devOptions struct {
	StateDir        string
	SourceDir       string
	KWOKNodes       int
	KWOKMaxPods     int
	InstallPackages bool
	InstallPaddock  bool
	RouterAuthz     string
	Profile         string

	GVisor bool
}

func (o *devOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SourceDir, "source-dir", "", "Paddock checkout whose hack/ scripts build the binaries (default: the checkout holding the working directory)")
	fs.IntVar(&o.KWOKNodes, "kwok-nodes", 2, "number of KWOK fake nodes")
	fs.IntVar(&o.KWOKMaxPods, "kwok-max-pods", devcluster.DefaultKWOKMaxPods, "Pods each KWOK fake node holds; raise it to hold thousands of Sandboxes on a few fake nodes")
	fs.BoolVar(&o.InstallPackages, "install-packages", true, "install missing Debian packages with apt-get")
	fs.BoolVar(&o.GVisor, "gvisor", true, "build gVisor (runsc), configure it in containerd and create RuntimeClass gvisor; to change it on a running cluster, run paddock dev down --keep-state first")
	fs.BoolVar(&o.InstallPaddock, "install-paddock", true, "build Paddock's images from the source tree and install the controller (core and extensions) into the cluster")
	fs.StringVar(&o.Profile, "profile", devcluster.ProfileDefault, "install profile: "+devcluster.ProfileDefault+" (dist/paddock.yaml and dist/paddock-router.yaml) or "+
		devcluster.ProfileUpstreamUnauthenticatedMigration+" (UNSAFE: upstream's tokenless pod-IP and in-cluster router paths, for Pods labelled paddock.dev/sandbox-client=true; docs/compatibility.md)")
	fs.StringVar(&o.RouterAuthz, "router-authz", devcluster.RouterAuthzTokenReview, "the router's --authz-mode: tokenreview (callers send a Kubernetes token with access to the sandbox) or allow-all (no authentication; anyone who reaches the router reaches every sandbox)")
}

// validateProfile refuses an unknown --profile and warns about the migration profile.
func (o *devOptions) validateProfile(out io.Writer) error {
	switch o.Profile {
	case devcluster.ProfileDefault:
		return nil
	case devcluster.ProfileUpstreamUnauthenticatedMigration:
		fmt.Fprintln(out, "WARNING: --profile="+devcluster.ProfileUpstreamUnauthenticatedMigration+": sandboxd serves commands without a token to anything on the pod network, "+
			"and the router to Pods labelled paddock.dev/sandbox-client=true; NetworkPolicy (enforced on this cluster) is then the only fence, so any Pod it lets through can run commands in a sandbox by pod IP. For migrating from upstream only.")
		return nil
	}
	return fmt.Errorf("--profile=%q is not one of %s, %s", o.Profile, devcluster.ProfileDefault, devcluster.ProfileUpstreamUnauthenticatedMigration)
}

// validateRouterAuthz refuses an unknown --router-authz and warns about allow-all.
func (o *devOptions) validateRouterAuthz(out io.Writer) error {
	switch o.RouterAuthz {
	case devcluster.RouterAuthzTokenReview:
		return nil
	case devcluster.RouterAuthzAllowAll:
		fmt.Fprintln(out, "WARNING: --router-authz=allow-all: the router serves every request without authentication; anyone who reaches it reaches every claimed sandbox. Local development only.")
		return nil
	}
	return fmt.Errorf("--router-authz=%q is not one of %s, %s", o.RouterAuthz, devcluster.RouterAuthzTokenReview, devcluster.RouterAuthzAllowAll)
}

// Config validates the flags and turns them into the cluster configuration.
func (o *devOptions) Config(needSource bool) (devcluster.Config, error) {
	stateDir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return devcluster.Config{}, fmt.Errorf("--state-dir %q: %w", o.StateDir, err)
	}
	cfg := devcluster.Defaults(stateDir)
	cfg.KWOKNodes, cfg.KWOKMaxPods, cfg.GVisor = o.KWOKNodes, o.KWOKMaxPods, o.GVisor
	if needSource {
		src := o.SourceDir
		if src == "" {
			wd, err := os.Getwd()
			if err != nil {
				return cfg, err
			}
			if src, err = findSourceDir(wd); err != nil {
				return cfg, err
			}
		}
		cfg.SourceDir = src
	}
	return cfg, cfg.Validate()
}

// findSourceDir walks up from dir to the Paddock checkout holding it.
func findSourceDir(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/paddock-dev/paddock\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside a Paddock checkout: run paddock dev up from one, or pass --source-dir")
		}
	}
}

func newDevCommand() *cobra.Command {
	o := &devOptions{}
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run a local Kubernetes cluster (a real node plus KWOK fake nodes) for development",
	}
	dev.PersistentFlags().StringVar(&o.StateDir, "state-dir", defaultStateDir, "directory that holds every file, pid and log of the cluster")

	up := &cobra.Command{
		Use:   "up",
		Short: "Build what is missing and start the cluster; does nothing when it already runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.Config(true)
			if err != nil {
				return err
			}
			if err := errors.Join(o.validateRouterAuthz(cmd.ErrOrStderr()), o.validateProfile(cmd.ErrOrStderr())); err != nil {
				return err
			}
			return devcluster.Up(cmd.Context(), cfg, devcluster.UpOptions{InstallPackages: o.InstallPackages, InstallPaddock: o.InstallPaddock,
				RouterAuthz: o.RouterAuthz, Profile: o.Profile, Out: cmd.OutOrStdout()})
		},
	}
	o.AddFlags(up.Flags())

	var keepState bool
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop every process of the cluster and remove its state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.Config(false)
			if err != nil {
				return err
			}
			return devcluster.Down(cmd.Context(), cfg, devcluster.DownOptions{KeepState: keepState, Out: cmd.OutOrStdout()})
		},
	}
	down.Flags().BoolVar(&keepState, "keep-state", false, "keep the state dir (etcd data, volumes, logs) for the next up")

	status := &cobra.Command{
		Use:   "status",
		Short: "Report each component of the cluster; exits non-zero unless all are ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.Config(false)
			if err != nil {
				return err
			}
			statuses, healthy := devcluster.Status(cmd.Context(), cfg)
			devcluster.PrintStatus(cmd.OutOrStdout(), statuses)
			if !healthy {
				return errors.New("the cluster is not fully up; run: paddock dev up")
			}
			return nil
		},
	}

	dev.AddCommand(up, down, status, newDevRegistryCommand(), newDevProvisionerCommand(), newDevInternetCommand())
	return dev
}

// newDevRegistryCommand is the registry process `up` starts in the background.
func newDevRegistryCommand() *cobra.Command {
	var addr, dir string
	var reader devcluster.Reader
	cmd := &cobra.Command{
		Use:    "registry",
		Short:  "Serve the cluster's OCI registry (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reader.Addr != "" && reader.PasswordFile == "" {
				return errors.New("--reader-address needs --reader-password-file")
			}
			return devcluster.ServeRegistry(cmd.Context(), addr, dir, reader)
		},
	}
	cmd.Flags().StringVar(&addr, "address", "127.0.0.1:5001", "loopback address to serve on")
	cmd.Flags().StringVar(&reader.Addr, "reader-address", "", "address to serve the registry read-only on, to "+devcluster.RegistryReaderUser+" with the password in --reader-password-file")
	cmd.Flags().StringVar(&reader.PasswordFile, "reader-password-file", "", "file with the reader address's password, made when missing")
	cmd.Flags().StringVar(&dir, "dir", "", "directory for blobs")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// newDevInternetCommand is the internet stand-in `up` starts in a network namespace of its own.
func newDevInternetCommand() *cobra.Command {
	var dir, network string
	cmd := &cobra.Command{
		Use:    "internet",
		Short:  "Serve the internet stand-in: .test hosts and their resolver (started by up in its own network namespace)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := netip.ParsePrefix(network)
			if err != nil {
				return fmt.Errorf("--network=%q: %w; want a CIDR such as 198.19.64.0/24", network, err)
			}
			return standin.Run(cmd.Context(), standin.Options{Dir: dir, Network: p, Hosts: standin.DefaultHosts})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "state directory: the CA, added hosts and the control socket")
	cmd.Flags().StringVar(&network, "network", "198.19.64.0/24", "the stand-in's address range")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// newDevProvisionerCommand is the dynamic volume provisioner `up` starts in the background.
func newDevProvisionerCommand() *cobra.Command {
	var kubeconfig, dir string
	cmd := &cobra.Command{
		Use:    "provisioner",
		Short:  "Provision host-path volumes for the default StorageClass (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devcluster.RunProvisioner(cmd.Context(), kubeconfig, dir)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "admin kubeconfig of the cluster")
	cmd.Flags().StringVar(&dir, "dir", "", "directory under which volumes are made")
	_ = cmd.MarkFlagRequired("kubeconfig")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
