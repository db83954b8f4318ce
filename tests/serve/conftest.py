from serve_fixtures import db_url, served, served_project  # noqa: F401 - fixtures for every test here
