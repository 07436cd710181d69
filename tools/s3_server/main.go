// Command s3-server is a real S3-compatible HTTP server for gpuledger's lake tests: the
// gofakes3 request router (path- and virtual-host-style S3 REST, signatures accepted, not
// checked) over its in-memory backend. It prints "listening on ADDR" once it accepts
// connections, so a test can start it on port 0 and read the port back.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: any free port)")
	bucket := flag.String("bucket", "", "create this bucket at start (optional)")
	flag.Parse()

	backend := s3mem.New()
	if *bucket != "" {
		if err := backend.CreateBucket(*bucket); err != nil {
			log.Fatalf("create bucket %s: %v", *bucket, err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true))
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen %s: %v", *addr, err)
	}
	fmt.Fprintf(os.Stdout, "listening on %s\n", listener.Addr().String())
	os.Stdout.Sync()
	log.Fatal(http.Serve(listener, faker.Server()))
}
