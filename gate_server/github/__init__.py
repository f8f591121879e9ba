"""GitHub integration: the webhook, OIDC uploads and App mode (the accept rules live in rnx/)."""
