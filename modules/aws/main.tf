# EC2 instances booted from a Talos AMI with the machine config as user data.
# Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), region from var.region.

terraform {
  required_version = ">= 1.4"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret, at most 16 KiB raw)."
  type = map(object({
    role           = string
    user_data      = string
    size           = optional(string)
    image          = optional(string)
    subnet_id      = optional(string)
    root_volume_gb = optional(number)
  }))
  sensitive = true
}

variable "region" {
  type = string
}

variable "default_size" {
  type    = string
  default = "t3.small"
}

variable "default_image" {
  description = "Talos AMI id when a machine has no image."
  type        = string
  default     = null
}

variable "subnet_id" {
  description = "Subnet for machines that name none; it needs an IPv6 CIDR block for IPv6."
  type        = string
}

variable "security_group_ids" {
  type    = list(string)
  default = []
}

variable "enable_ipv6" {
  type    = bool
  default = true
}

variable "root_volume_gb" {
  type    = number
  default = 20
}

provider "aws" {
  region = var.region
}

locals {
  names = toset(nonsensitive(keys(var.machines)))
  spec = {
    for name in local.names : name => {
      role      = nonsensitive(var.machines[name].role)
      size      = coalesce(nonsensitive(var.machines[name].size), var.default_size)
      image     = coalesce(nonsensitive(var.machines[name].image), var.default_image)
      subnet_id = coalesce(nonsensitive(var.machines[name].subnet_id), var.subnet_id)
      volume_gb = coalesce(nonsensitive(var.machines[name].root_volume_gb), var.root_volume_gb)
    }
  }
}

resource "aws_instance" "machine" {
  for_each = local.names

  ami                    = local.spec[each.key].image
  instance_type          = local.spec[each.key].size
  subnet_id              = local.spec[each.key].subnet_id
  vpc_security_group_ids = var.security_group_ids
  ipv6_address_count     = var.enable_ipv6 ? 1 : 0
  user_data_base64       = base64encode(var.machines[each.key].user_data)

  metadata_options {
    http_tokens = "required"
  }

  root_block_device {
    volume_size = local.spec[each.key].volume_gb
    volume_type = "gp3"
  }

  tags = {
    Name                  = "${var.cluster_name}-${each.key}"
    "rezus.cloud/cluster" = var.cluster_name
    "rezus.cloud/role"    = local.spec[each.key].role
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [user_data_base64, ami]
  }
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, i in aws_instance.machine : name => {
      ipv4 = i.public_ip != "" ? i.public_ip : null
      ipv6 = length(i.ipv6_addresses) > 0 ? i.ipv6_addresses[0] : null
    }
  }
}
