module bootseal.test/spiffe-issuer

go 1.24.0

require (
	github.com/go-jose/go-jose/v4 v4.1.5
	github.com/spiffe/go-spiffe/v2 v2.9.0
)
