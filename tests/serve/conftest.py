from serve_fixtures import served, served_project  # noqa: F401 - fixtures for every test here
