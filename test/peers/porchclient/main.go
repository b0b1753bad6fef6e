// Porch's own client path for a PackageRevisionResources update, as a test peer: Porch v1.5.8's
// engine (pkg/engine), task handler (pkg/task: replace resources, then render with kpt's renderer)
// and gRPC function runtime call a function runner at -addr exactly as porch-server does. Only the
// storage around them is scaffolding: an in-memory cache, repository, package revision and draft
// that record what the draft receives.
//
// Input (stdin, JSON): {"address", "maxMessageSize", "defaultImagePrefix", "batches": [{"pauseMs",
// "updates": [{"name", "resources": {path: content}, "timeoutMs"}]}]}. The batches run in order
// through one engine (one gRPC connection); the updates of a batch run at the same time; pauseMs
// waits before a batch. timeoutMs is the request's deadline (0: porch-server's 291 s request
// timeout, pkg/apiserver/apiserver.go).
//
// Output (stdout, JSON): one outcome per update, in input order: the resources the draft received
// (null when it received none), whether the draft was closed (pushed), the RenderStatus, the
// returned error's text and the gRPC code wrapped in it (status.FromError through the chain), and
// the elapsed time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/kptdev/kpt/pkg/lib/runneroptions"
	porchapi "github.com/nephio-project/porch/api/porch/v1alpha1"
	configapi "github.com/nephio-project/porch/api/porchconfig/v1alpha1"
	cachetypes "github.com/nephio-project/porch/pkg/cache/types"
	"github.com/nephio-project/porch/pkg/engine"
	"github.com/nephio-project/porch/pkg/repository"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// porch-server's request timeout (pkg/apiserver/apiserver.go sets GenericConfig.RequestTimeout):
// the apiserver's request context, which reaches the runner as the call's deadline, ends then.
const porchRequestTimeout = 291 * time.Second

type update struct {
	Name      string            `json:"name"`
	Resources map[string]string `json:"resources"`
	TimeoutMs int               `json:"timeoutMs"`
}

type batch struct {
	PauseMs int      `json:"pauseMs"`
	Updates []update `json:"updates"`
}

type input struct {
	Address            string  `json:"address"`
	MaxMessageSize     int     `json:"maxMessageSize"`
	DefaultImagePrefix string  `json:"defaultImagePrefix"`
	Batches            []batch `json:"batches"`
}

type outcome struct {
	Name         string                 `json:"name"`
	Draft        map[string]string      `json:"draft"`
	DraftUpdates int                    `json:"draftUpdates"`
	Closed       bool                   `json:"closed"`
	RenderStatus *porchapi.RenderStatus `json:"renderStatus"`
	Error        string                 `json:"error,omitempty"`
	GrpcCode     string                 `json:"grpcCode,omitempty"`
	GrpcMessage  string                 `json:"grpcMessage,omitempty"`
	ElapsedMs    float64                `json:"elapsedMs"`
}

func main() {
	addr := flag.String("addr", "", "the function runner's address (overrides the input's)")
	flag.Parse()
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fail(fmt.Errorf("bad input: %w", err))
	}
	if *addr != "" {
		in.Address = *addr
	}
	if in.MaxMessageSize == 0 {
		in.MaxMessageSize = 6 * 1024 * 1024 // porch-server's --max-request-body-size default
	}
	if in.DefaultImagePrefix == "" {
		in.DefaultImagePrefix = runneroptions.GHCRImagePrefix // porch-server's --default-image-prefix default
	}

	// The engine as pkg/apiserver/apiserver.go builds it, minus what an update does not use.
	prefix := in.DefaultImagePrefix
	cad, err := engine.NewCaDEngine(
		engine.WithCache(&memCache{repo: &memRepo{}}),
		engine.WithBuiltinFunctionRuntime(prefix),
		engine.WithGRPCFunctionRuntime(engine.GRPCRuntimeOptions{FunctionRunnerAddress: in.Address, MaxGrpcMessageSize: in.MaxMessageSize, DefaultImagePrefix: prefix}),
		engine.WithRunnerOptionsResolver(func(string) runneroptions.RunnerOptions {
			o := runneroptions.RunnerOptions{}
			o.InitDefaults(prefix)
			return o
		}),
	)
	if err != nil {
		fail(err)
	}

	var outcomes []*outcome
	for _, b := range in.Batches {
		if b.PauseMs > 0 {
			time.Sleep(time.Duration(b.PauseMs) * time.Millisecond)
		}
		results := make([]*outcome, len(b.Updates))
		var wg sync.WaitGroup
		for i, u := range b.Updates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = run(cad, u)
			}()
		}
		wg.Wait()
		outcomes = append(outcomes, results...)
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(outcomes); err != nil {
		fail(err)
	}
}

func run(cad engine.CaDEngine, u update) *outcome {
	timeout := porchRequestTimeout
	if u.TimeoutMs > 0 {
		timeout = time.Duration(u.TimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	meta := metav1.ObjectMeta{Namespace: "default", Name: u.Name, ResourceVersion: "1"}
	old := &porchapi.PackageRevisionResources{ObjectMeta: meta, Spec: porchapi.PackageRevisionResourcesSpec{Resources: u.Resources}}
	next := old.DeepCopy()
	pr := &memPackageRevision{meta: meta, resources: old}
	repoObj := &configapi.Repository{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "repo"}}

	started := time.Now()
	_, renderStatus, err := cad.UpdatePackageResources(ctx, repoObj, pr, old.DeepCopy(), next)
	o := &outcome{Name: u.Name, RenderStatus: renderStatus, ElapsedMs: float64(time.Since(started).Microseconds()) / 1000}
	if err != nil {
		o.Error = err.Error()
		if s, ok := status.FromError(err); ok {
			o.GrpcCode = s.Code().String()
		}
		// the innermost status's own message, as the runner sent it
		for e := err; e != nil; {
			if g, ok := e.(interface{ GRPCStatus() *status.Status }); ok {
				o.GrpcMessage = g.GRPCStatus().Message()
				break
			}
			w, ok := e.(interface{ Unwrap() error })
			if !ok {
				break
			}
			e = w.Unwrap()
		}
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if d := pr.draft; d != nil {
		o.Draft = d.resources
		o.DraftUpdates = d.updates
		o.Closed = d.closed
	}
	return o
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "porchclient: %v\n", err)
	os.Exit(2)
}

// memCache is Porch's repository cache, holding one in-memory repository for every spec. Methods
// an update does not call are left to the embedded interface (nil: calling one panics).
type memCache struct {
	cachetypes.Cache
	repo *memRepo
}

func (c *memCache) OpenRepository(context.Context, *configapi.Repository) (repository.Repository, error) {
	return c.repo, nil
}

// memRepo hands out drafts of the package revision it is given and "pushes" a draft by marking it closed.
type memRepo struct {
	repository.Repository
}

func (r *memRepo) KubeObjectNamespace() string { return "default" }
func (r *memRepo) KubeObjectName() string      { return "repo" }
func (r *memRepo) Key() repository.RepositoryKey {
	return repository.RepositoryKey{Namespace: "default", Name: "repo"}
}

func (r *memRepo) UpdatePackageRevision(_ context.Context, old repository.PackageRevision) (repository.PackageRevisionDraft, error) {
	pr := old.(*memPackageRevision)
	d := &memDraft{pr: pr}
	pr.mu.Lock()
	pr.draft = d
	pr.mu.Unlock()
	return d, nil
}

func (r *memRepo) ClosePackageRevisionDraft(_ context.Context, prd repository.PackageRevisionDraft, _ int) (repository.PackageRevision, error) {
	d := prd.(*memDraft)
	d.pr.mu.Lock()
	defer d.pr.mu.Unlock()
	d.closed = true
	return d.pr, nil
}

// memPackageRevision is a Draft package revision with the given resources.
type memPackageRevision struct {
	repository.PackageRevision
	meta      metav1.ObjectMeta
	resources *porchapi.PackageRevisionResources
	mu        sync.Mutex
	draft     *memDraft
}

func (p *memPackageRevision) KubeObjectNamespace() string { return p.meta.Namespace }
func (p *memPackageRevision) KubeObjectName() string      { return p.meta.Name }
func (p *memPackageRevision) GetMeta() metav1.ObjectMeta  { return p.meta }
func (p *memPackageRevision) ResourceVersion() string     { return p.meta.ResourceVersion }
func (p *memPackageRevision) Key() repository.PackageRevisionKey {
	return repository.PackageRevisionKey{PkgKey: repository.PackageKey{RepoKey: repository.RepositoryKey{Namespace: "default", Name: "repo"}, Package: p.meta.Name}, WorkspaceName: "ws"}
}
func (p *memPackageRevision) Lifecycle(context.Context) porchapi.PackageRevisionLifecycle {
	return porchapi.PackageRevisionLifecycleDraft
}

func (p *memPackageRevision) GetPackageRevision(context.Context) (*porchapi.PackageRevision, error) {
	return &porchapi.PackageRevision{ObjectMeta: p.meta, Spec: porchapi.PackageRevisionSpec{PackageName: p.meta.Name, RepositoryName: "repo", WorkspaceName: "ws", Lifecycle: porchapi.PackageRevisionLifecycleDraft}}, nil
}

func (p *memPackageRevision) GetResources(context.Context) (*porchapi.PackageRevisionResources, error) {
	return p.resources.DeepCopy(), nil
}

// memDraft records what the engine writes into the draft.
type memDraft struct {
	pr        *memPackageRevision
	resources map[string]string
	updates   int
	closed    bool
}

func (d *memDraft) Key() repository.PackageRevisionKey { return d.pr.Key() }
func (d *memDraft) GetMeta() metav1.ObjectMeta         { return d.pr.meta }

func (d *memDraft) UpdateResources(_ context.Context, prr *porchapi.PackageRevisionResources, _ *porchapi.Task) error {
	d.pr.mu.Lock()
	defer d.pr.mu.Unlock()
	d.resources = map[string]string{}
	for k, v := range prr.Spec.Resources {
		d.resources[k] = v
	}
	d.updates++
	return nil
}

func (d *memDraft) UpdateLifecycle(context.Context, porchapi.PackageRevisionLifecycle) error {
	return nil
}
