// Command palisade runs Palisade nodes and local testnets, acquires and
// verifies fencing tokens, and tells the fencing story with "palisade demo".
// Run "palisade help" for the commands and a worked example.
package main

import "github.com/palisade-dev/palisade/cmd/palisade/internal/cli"

func main() { cli.Main() }
