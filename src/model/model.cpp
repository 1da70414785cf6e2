// placeholder: filled in by the layer's first implementation
