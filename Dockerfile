# A Palisade image: the static binary and nothing else. No base image can
# be pulled, so nothing is built in here: build the binary on the host
# first, from the repository root, then the image around it:
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o palisade ./cmd/palisade
#   docker build -t palisade:dev .
#
# (.dockerignore sends the builder that one file.) There is no shell: the
# compose file's services, healthchecks and "docker exec" all run
# /palisade itself ("palisade bootstrap", "palisade probe", "palisade
# evidence", "palisade put").
#
# The default command runs a node from a directory written by keygen or
# dkg, mounted at /data (docker run -v DIR:/data palisade:dev); its vote
# store lives there, so a restarted container keeps its votes. No VOLUME
# is declared: the compose file mounts its own, and an anonymous one per
# container would be left behind by every "docker-compose down".
#
# The container runs as root so that it can read key files of mode 0600
# owned by whoever made them on the host; "palisade bootstrap" gives the
# files it writes to a shared host directory that directory's owner.
FROM scratch
COPY palisade /palisade
ENTRYPOINT ["/palisade"]
CMD ["node", "--dir", "/data"]
