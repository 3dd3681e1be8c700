// Package layout has no code of its own: its test holds the module's
// package layers and fails when an import climbs back up them, or when a
// package is added without a place in them.
//
// From the bottom: helpers with no Palisade imports; the curve and the
// threshold scheme (crypto); the DKG maths and the wire protocol; the
// transport and proof-of-possession; the verifier that resources embed;
// node and client; the node-side DKG ceremony; the in-process testnet;
// the servers only the CLI runs (agent, resource); the CLI; the binary.
// internal/ holds only what node, client and testnet share; the CLI and
// its servers live under cmd/palisade/internal, out of everyone else's
// reach.
package layout
