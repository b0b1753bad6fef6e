// A second gRPC client for fnr's tests: it calls a function runner the way porch-server does
// (grpc-go, Porch's own generated evaluator client, plaintext, no deadline, 6 MiB send and receive
// limits, only resource_list read from the response, a failure kept as the error's text).
//
// Input: JSON lines on stdin, {"name": "...", "image": "...", "input": "<base64 ResourceList>"}.
// Output: JSON lines on stdout, {"name": "...", "output": "<base64>", "error": "..."}, in order.
// Usage: goclient -addr 127.0.0.1:PORT [-max-size 6291456]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/nephio-project/porch/func/evaluator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type request struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Input []byte `json:"input"`
}

type response struct {
	Name   string `json:"name"`
	Output []byte `json:"output"`
	Error  string `json:"error,omitempty"`
}

func main() {
	addr := flag.String("addr", "", "host:port of the function runner")
	maxSize := flag.Int("max-size", 6*1024*1024, "gRPC send and receive limit in bytes (porch-server's default)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "goclient: -addr is required")
		os.Exit(2)
	}
	cc, err := grpc.NewClient(*addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(*maxSize), grpc.MaxCallSendMsgSize(*maxSize)),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goclient: %v\n", err)
		os.Exit(1)
	}
	defer cc.Close()
	client := evaluator.NewFunctionEvaluatorClient(cc)

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "goclient: bad input line: %v\n", err)
			os.Exit(2)
		}
		// Like porch-server's grpcRunner: the caller's context (no deadline), and only
		// resource_list is used; an error becomes text.
		res, err := client.EvaluateFunction(context.Background(), &evaluator.EvaluateFunctionRequest{ResourceList: req.Input, Image: req.Image})
		r := response{Name: req.Name}
		if err != nil {
			r.Error = fmt.Errorf("func eval %q failed: %w", req.Image, err).Error()
		} else {
			r.Output = res.ResourceList
		}
		if err := out.Encode(r); err != nil {
			fmt.Fprintf(os.Stderr, "goclient: %v\n", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "goclient: reading stdin: %v\n", err)
		os.Exit(2)
	}
}
