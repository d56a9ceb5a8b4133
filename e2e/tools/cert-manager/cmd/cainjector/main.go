// Command cainjector is a small cert-manager CA injector for Keyward's tests, built from the
// exported pkg/controller/cainjector package of the pinned github.com/cert-manager/cert-manager
// module (the upstream binary lives in a module the Go proxy does not serve).
//
// It fills the caBundle of ValidatingWebhookConfigurations, MutatingWebhookConfigurations and
// CRD conversion webhooks annotated with cert-manager.io/inject-ca-from (or
// inject-ca-from-secret). APIServices are left out. It runs as a local process with
// --kubeconfig; leader election on a Lease is opt-in (--leader-election-namespace).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	// Our own flag set: controller-runtime registers a global --kubeconfig flag of its own.
	flags := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster to manage (empty: in-cluster config)")
	namespace := flags.String("namespace", "", "only inject from resources in this namespace (empty: all namespaces)")
	leaderNamespace := flags.String("leader-election-namespace", "",
		"namespace of the leader election Lease (empty: no leader election)")
	klog.InitFlags(flags)
	_ = flags.Parse(os.Args[1:]) // ExitOnError: a bad flag exits with usage
	ctrl.SetLogger(klog.NewKlogr().WithName("cainjector"))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *leaderNamespace); err != nil {
		fmt.Fprintf(os.Stderr, "cert-manager cainjector: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, leaderNamespace string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	config = util.RestConfigWithUserAgent(config, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))

	var namespaces map[string]cache.Config
	if namespace != "" {
		namespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// As upstream: Secrets are read directly (only their metadata is watched), so the
		// injector never caches every Secret of the cluster.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                       metricsserver.Options{BindAddress: "0"}, // no metrics listener
		LeaderElection:                leaderNamespace != "",
		LeaderElectionNamespace:       leaderNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    namespace,
		EnableCertificatesDataSource: true, // the chart uses inject-ca-from (a Certificate)
		EnabledReconcilersFor: map[string]bool{
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.CustomResourceDefinitionName:       true,
			cainjector.APIServiceName:                     false,
		},
	})
	if err != nil {
		return fmt.Errorf("register injectors: %w", err)
	}
	// Runs once the manager started (and, with leader election, holds the Lease); the test
	// helper waits for this line.
	err = mgr.Add(manager.RunnableFunc(func(context.Context) error {
		ctrl.Log.Info("cert-manager cainjector running")
		return nil
	}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
