// OpenKruise's SidecarTerminator controller (github.com/openkruise/kruise, pkg/controller/sidecarterminator),
// run unchanged as kruise-manager runs it, but alone: the benchmark's and the parity table's peer.
//
// kruise-manager would also start its webhooks and every other controller, among them the
// ContainerRecreateRequest controller, which completes at once every request its own webhook has
// not labelled (the benchmarks run without that webhook: the kubelet simulator plays
// kruise-daemon). This main keeps what shapes the SidecarTerminator controller's work: Kruise's
// scheme, its cache (utilclient.NewCache, every pod of the cluster, or of --namespace), its client
// limits (--rest-config-qps 30, --rest-config-burst 50), its feature gates (SidecarTerminator is
// switched on here) and the controller's own flags (--sidecarterminator-workers 3).
// scripts/build-kruise-peer.sh builds it inside a copy of the Kruise module, whose go.mod it uses.
//
// For the benchmark it adds what kruise-manager lacks: /readyz answers 200 once the pods, nodes
// and ContainerRecreateRequests the controller reads are cached, and on SIGUSR2 it runs a full
// garbage collection and writes the live Go heap and the RSS, as JSON, to $BENCH_GC_PROBE_OUT
// (bench/watcher/gc-probe.mjs does the same for Node processes).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
	policyv1alpha1 "github.com/openkruise/kruise/apis/policy/v1alpha1"
	policyv1beta1 "github.com/openkruise/kruise/apis/policy/v1beta1"
	"github.com/openkruise/kruise/pkg/controller/sidecarterminator"
	"github.com/openkruise/kruise/pkg/features"
	utilclient "github.com/openkruise/kruise/pkg/util/client"
	utilfeature "github.com/openkruise/kruise/pkg/util/feature"
)

var scheme = k8sruntime.NewScheme()

// As kruise-manager's main.go registers its types.
func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(appsv1alpha1.AddToScheme(clientgoscheme.Scheme))
	utilruntime.Must(appsv1beta1.AddToScheme(clientgoscheme.Scheme))
	utilruntime.Must(appsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(appsv1beta1.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))
	utilruntime.Must(policyv1beta1.AddToScheme(scheme))
	scheme.AddUnversionedTypes(metav1.SchemeGroupVersion, &metav1.UpdateOptions{}, &metav1.DeleteOptions{}, &metav1.CreateOptions{})
}

func main() {
	metricsAddr := flag.String("metrics-addr", "127.0.0.1:0", "The address the metric endpoint binds to.")
	healthProbeAddr := flag.String("health-probe-addr", "127.0.0.1:8000", "The address the healthz/readyz endpoint binds to.")
	namespace := flag.String("namespace", "", "Restricts the cache to this namespace, as kruise-manager's --namespace does. Defaults to all namespaces.")
	// kruise-manager's defaults.
	restConfigQPS := flag.Int("rest-config-qps", 30, "QPS of rest config.")
	restConfigBurst := flag.Int("rest-config-burst", 50, "Burst of rest config.")
	utilfeature.DefaultMutableFeatureGate.AddFlag(pflag.CommandLine)
	klog.InitFlags(nil)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()
	ctrl.SetLogger(klog.NewKlogr())
	if !utilfeature.DefaultFeatureGate.Enabled(features.SidecarTerminator) {
		if err := utilfeature.DefaultMutableFeatureGate.Set(string(features.SidecarTerminator) + "=true"); err != nil {
			fail(err, "cannot switch the SidecarTerminator feature gate on")
		}
	}
	features.SetDefaultFeatureGates()

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS = float32(*restConfigQPS)
	cfg.Burst = *restConfigBurst
	cfg.UserAgent = "kruise-manager"

	cacheOptions := cache.Options{}
	if *namespace != "" {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{*namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *healthProbeAddr,
		LeaderElection:         false,
		Cache:                  cacheOptions,
		NewCache:               utilclient.NewCache,
	})
	if err != nil {
		fail(err, "unable to create the manager")
	}
	if err := sidecarterminator.Add(mgr); err != nil {
		fail(err, "unable to add the SidecarTerminator controller")
	}

	var synced atomic.Bool
	ctx := ctrl.SetupSignalHandler()
	// The informers the controller reads from (its pod watch; nodes and ContainerRecreateRequests
	// through the cached client), started now rather than at its first reconcile, as the other
	// controllers of kruise-manager would have started them.
	go func() {
		for _, object := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &appsv1beta1.ContainerRecreateRequest{}} {
			if _, err := mgr.GetCache().GetInformer(ctx, object); err != nil {
				klog.ErrorS(err, "cannot start an informer")
				return
			}
		}
		if mgr.GetCache().WaitForCacheSync(ctx) {
			synced.Store(true)
			klog.InfoS("caches synced")
		}
	}()
	if err := mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil }); err != nil {
		fail(err, "unable to add the health check")
	}
	if err := mgr.AddReadyzCheck("caches-synced", func(*http.Request) error {
		if !synced.Load() {
			return errors.New("caches not synced yet")
		}
		return nil
	}); err != nil {
		fail(err, "unable to add the readiness check")
	}
	serveGcProbe(os.Getenv("BENCH_GC_PROBE_OUT"))

	if err := mgr.Start(ctx); err != nil {
		fail(err, "problem running the manager")
	}
}

// On SIGUSR2: a full collection, then the live heap and RSS written to `out`.
func serveGcProbe(out string) {
	if out == "" {
		return
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR2)
	go func() {
		for range signals {
			runtime.GC()
			var stats runtime.MemStats
			runtime.ReadMemStats(&stats)
			body, _ := json.Marshal(map[string]uint64{"heapUsed": stats.HeapAlloc, "heapSys": stats.HeapSys, "rss": rssBytes()})
			if err := os.WriteFile(out, body, 0o644); err != nil {
				klog.ErrorS(err, "cannot write the GC probe's output")
			}
		}
	}()
}

// VmRSS from /proc/self/status, in bytes.
func rssBytes() uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "VmRSS:" {
			kib, _ := strconv.ParseUint(fields[1], 10, 64)
			return kib * 1024
		}
	}
	return 0
}

func fail(err error, message string) {
	klog.ErrorS(err, message)
	klog.Flush()
	os.Exit(1)
}
