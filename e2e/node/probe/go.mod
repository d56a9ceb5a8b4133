// The workload of Keyward's installed tests: a container that reports what it sees.
module keyward.dev/e2e/node/probe

go 1.26.0
