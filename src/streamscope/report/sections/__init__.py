"""The sections of the report page, one module each; each ``section`` function takes the run
(and the page that collects figures, where it draws any) and returns the section's HTML,
``<section id="...">`` first."""
