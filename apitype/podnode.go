package apitype

// PodTokenHeader carries, on a sandbox pod's first connection, the pod's
// projected service-account token: the gateway verifies it (TokenReview)
// against the pod its join token was minted for.
const PodTokenHeader = "X-Conch-Pod-Token"

// PodTokenAudience is the audience of that token: the Kubernetes API
// server itself refuses a token meant for conch.
const PodTokenAudience = "conch"
