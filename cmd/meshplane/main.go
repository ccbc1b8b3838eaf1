// Command meshplane runs the whole management plane in one process:
// registration, ingest, translation and distribution mounted on one port.
// It suits local runs, the demo and small installations.
//
//	meshplane all-in-one --dev-pki-dir ./.meshplane --bootstrap-tokens-file tokens
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "all-in-one":
		os.Exit(allInOne(os.Args[2:]))
	case "version":
		fmt.Println(version())
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "meshplane: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: meshplane <command> [flags]

commands:
  all-in-one   run registration, ingest, translation and distribution in one process
  version      print the version
`)
}
