"""Infrastructure: the local broker (with Maven resolution), the admin client, cluster discovery."""
