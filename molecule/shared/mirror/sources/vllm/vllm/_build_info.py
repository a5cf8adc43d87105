# generated at build time
