# syntax=docker/dockerfile:1
#
# The account service as one static binary on distroless's static image:
# no shell, no libc, CA certificates and a non-root user only.
#
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) -t accounts .
#   docker run -p 8080:8080 -e DATABASE_URL=postgres://... -e DATA_KEY=... accounts
#
# TestImageBinaryServesFromAnEmptyRoot (cmd/app) runs the build command
# below as it is written here and serves a sign-in from a root directory
# that holds nothing but the binary, as this image's does.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=(devel)
ARG REVISION=
# modernc's SQLite is pure Go: no cgo, so the binary needs no libc.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION} -X main.buildRevision=${REVISION}" -o /out/app ./cmd/app
# The working folder of the final image, where SQLite keeps its file when
# DATABASE_URL is unset; owned by distroless's nonroot user.
RUN mkdir -p /out/var/lib/accounts && chown 65532:65532 /out/var/lib/accounts

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /app
COPY --from=build --chown=65532:65532 /out/var/lib/accounts /var/lib/accounts
WORKDIR /var/lib/accounts
USER 65532:65532
# Loopback is the binary's default; in a container the API must listen on
# every interface to be reached through the published port.
ENV HTTP_ADDR=:8080
# The live heap is a few megabytes: at Go's default GOGC of 100 the
# collector runs dozens of times a second under load, at 400 a fourth as
# often, for a heap of tens of megabytes (docs/operations.md).
ENV GOGC=400
EXPOSE 8080
ENTRYPOINT ["/app"]
CMD ["serve"]
