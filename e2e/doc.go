// Package e2e is the fault suite of the docker testnet: it builds the
// static binary and the FROM-scratch image of the repository's Dockerfile,
// brings docker-compose.yml up under a compose project, network and data
// directory of its own (keys made by the nodes' DKG), and runs real
// faults against the containers:
//
//  1. every service healthy; a token acquired from the host writes (204),
//     a request without one is refused (401);
//  2. one node killed: acquires still succeed;
//  3. a client in its own container, holding a 2 s lease and writing, is
//     frozen with docker pause past its TTL; another client acquires and
//     writes; after docker unpause the frozen client's write is refused
//     (409) and the value stays the newer client's;
//  4. two nodes cut off with docker network disconnect: acquire fails
//     within its wait naming them; reconnected, acquires succeed;
//  5. a node killed and restarted under load: no node signed two votes for
//     one (resource, epoch) (no evidence anywhere; every token verifies;
//     epochs distinct per resource);
//  6. docker-compose down, then up: the keys are reused, the resource
//     still refuses the stale token, epochs continue above the last one.
//
// The tests sit behind the build tag e2e and need a Docker engine and
// docker-compose v1 or "docker compose" (PALISADE_E2E_COMPOSE picks one:
// "docker-compose" or "docker compose"):
//
//	go test -tags e2e -count=1 -v ./e2e
//
// .ci/run runs them whenever a Docker engine answers. They remove what
// they made (containers, network, volumes, image, data), also when they
// fail.
package e2e
