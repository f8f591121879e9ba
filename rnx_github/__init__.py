"""Talking to GitHub, for the action and the gate server alike: one REST client, GitHub App
authentication, CODEOWNERS, the accept rules and the one sticky pull request comment."""
