"""What the user sees while mcutorch works: progress bars and status lines (`ui.progress`)."""
