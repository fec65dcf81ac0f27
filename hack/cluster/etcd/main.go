// Command etcd is etcd v3 built from go.etcd.io/etcd/server/v3 for the
// local lab cluster (see cluster/README.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
