"""ResNet data: the ImageNet folder layout, its reference transforms, and the CPU tiers' export."""
