# A Palisade node image. No base image can be pulled, so nothing is built
# in here: build a static binary on the host first, then the image around it.
#
#   CGO_ENABLED=0 go build -o palisade ./cmd/palisade
#   docker build -t palisade:dev .
#
# The node directory (written by "palisade keygen") is mounted at /data; the
# node keeps its vote store there, so a restarted container keeps its votes.
# The container runs as root so that it can read key files of mode 0600
# owned by whoever ran keygen on the host.
FROM scratch
COPY palisade /palisade
VOLUME /data
ENTRYPOINT ["/palisade"]
CMD ["node", "--dir", "/data"]
