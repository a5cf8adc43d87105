# Replaced when the mirror is built by the GPU agents of the rocminfo capture the fixture packages print.
GPUS = []
