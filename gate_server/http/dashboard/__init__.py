"""The dashboard's routes: pages, sign-in, acting from a page; the pages themselves are
gate_server/dashboard/."""
