package apitype

// PodTokenAudience is the audience of the service-account token a sandbox
// pod of the kubernetes backend pairs with: the Kubernetes API server
// itself refuses a token meant for conch.
const PodTokenAudience = "conch"
