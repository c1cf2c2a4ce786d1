module gangcheck.io/e2e/pause

go 1.26.0
