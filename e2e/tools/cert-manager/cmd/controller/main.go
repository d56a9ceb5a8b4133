// Command controller is a small cert-manager controller for Keyward's tests, built from the
// exported packages of the pinned github.com/cert-manager/cert-manager module (the upstream
// binary lives in a module the Go proxy does not serve).
//
// It runs only what Keyward's chart needs: SelfSigned and CA Issuers/ClusterIssuers, the
// Certificate controllers that turn a Certificate into a Secret, and the CertificateRequest
// approver and signers for those two issuer types. It runs as a local process with
// --kubeconfig; leader election on a Lease is opt-in (--leader-election-namespace).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each imported controller package registers itself in controller.Known(); importing
	// exactly these is what limits the binary to the scope above.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The Issuer controllers look issuer types up in a registry filled by these packages.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to manage (empty: in-cluster config)")
	namespace := flag.String("namespace", "", "only manage resources in this namespace (empty: all namespaces)")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "kube-system",
		"namespace holding the Secrets that ClusterIssuers refer to")
	leaderNamespace := flag.String("leader-election-namespace", "",
		"namespace of the leader election Lease (empty: no leader election)")
	workers := flag.Int("workers", 5, "concurrent workers per controller")
	klog.InitFlags(flag.CommandLine) // -v for cert-manager's own log levels
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *namespace, *clusterResourceNamespace, *leaderNamespace, *workers); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager controller: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, clusterResourceNamespace, leaderNamespace string, workers int) error {
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: kubeconfig,
		Namespace:  namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			// upstream's defaults for a failed request's retry backoff
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	// The base context holds the informer factories every controller shares.
	base, err := factory.Build()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if leaderNamespace != "" {
		released, err := waitForLeadership(ctx, factory, leaderNamespace)
		if err != nil {
			return err
		}
		// On shutdown, or when a controller fails, give the Lease up and wait until it is
		// released, so a successor starts at once.
		defer func() { cancel(); <-released }()
	}

	g, ctx := errgroup.WithContext(ctx)
	names := make([]string, 0, len(controller.Known()))
	for name, construct := range controller.Known() {
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		names = append(names, name)
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	// Informers are started after the controllers registered theirs.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	sort.Strings(names)
	// The test helper waits for this line.
	log.Info("cert-manager controller running", "controllers", names)
	return g.Wait()
}

// waitForLeadership blocks until this process holds the Lease; losing it later exits the
// process, so two controllers never act at once. The returned channel closes once the elector
// stopped (and released the Lease) after ctx ends.
func waitForLeadership(ctx context.Context, factory *controller.ContextFactory, namespace string) (<-chan struct{}, error) {
	c, err := factory.Build("leader-election")
	if err != nil {
		return nil, err
	}
	id, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, "cert-manager-controller",
		c.Client.CoreV1(), c.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s-%d", id, os.Getpid()), EventRecorder: c.Recorder})
	if err != nil {
		return nil, err
	}
	elected := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					fmt.Fprintln(os.Stderr, "cert-manager controller: leader election lost")
					os.Exit(1)
				}
			},
		},
	})
	if err != nil {
		return nil, err
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		elector.Run(ctx)
	}()
	select {
	case <-elected:
		return released, nil
	case <-ctx.Done():
		<-released
		return nil, ctx.Err()
	}
}
